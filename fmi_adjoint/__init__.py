"""fmi-adjoint: parameter identification of multibody models with exact discrete adjoints."""
