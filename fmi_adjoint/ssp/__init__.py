"""Systems of FMUs described by SSP 1.0 (issue 28): reading ``.ssp`` archives and ``.ssd``
files (:mod:`.reading`) into frozen values (:mod:`.structure`), and a co-simulation master
that runs them (:mod:`.master`)."""
