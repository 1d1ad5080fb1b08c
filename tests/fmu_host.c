/* A minimal FMI 2.0 / FMI 3.0 Co-Simulation host for the tests of the FMU exporter
 * (tests/test_fmu_export.py).  No Python is involved: the FMU's shared library is loaded
 * with dlopen() and driven through the standard C API only.
 *
 * Usage:
 *   fmu_host -v 2|3 -l BINARY.so -t GUID/TOKEN -r RESOURCE_LOCATION -H COMM_STEP -n N_COMM
 *            [-c CYCLES] [-s VR=VALUE]... [-m K:VR=VALUE]... [-o VR]... [-x BAD_STEP] [-S] [-G]
 *
 *   -s VR=VALUE    set a Real/Float64 variable after instantiation (before initialization)
 *   -m K:VR=VALUE  set a variable after the K-th communication step (mid-run change)
 *   -o VR          output variable to read and print at every communication point
 *   -c CYCLES      repeat instantiate / initialize / step / free this many times; the
 *                  trajectory of every cycle must be bit-identical to that of the first
 *   -x BAD_STEP    in every cycle, first call doStep with this (invalid) communication
 *                  step: it must return Error and log an error message, and the instance
 *                  must stay usable
 *   -S             in every cycle, at the middle communication point: get the FMU state,
 *                  serialize and deserialize it, do one step, restore the deserialized
 *                  state, redo the step: the outputs must be bit-identical
 *   -G             first try to instantiate with a wrong GUID/token: must give NULL and
 *                  log an error
 *
 * stdout: one line per communication point of the first cycle, "t y1 y2 ..." (%.17g),
 * then "DONE cycles=<n> errors_logged=<k>".  stderr: every logged message.
 * Exit status: 0 ok, 2 usage, 3 an FMI call misbehaved, 4 a reproducibility check failed.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi2FunctionTypes.h"
#include "fmi3FunctionTypes.h"

#define MAX_VARS 64

static int errors_logged = 0;

static void host_logger2(fmi2ComponentEnvironment env, fmi2String name, fmi2Status status, fmi2String category,
                 fmi2String message, ...)
{
    (void)env;
    va_list args;
    va_start(args, message);
    fprintf(stderr, "LOG status=%d category=%s instance=%s: ", (int)status, category ? category : "(null)",
            name ? name : "(null)");
    vfprintf(stderr, message ? message : "(null)", args);
    fputc('\n', stderr);
    va_end(args);
    if (status >= fmi2Error) ++errors_logged;
}

static void host_logger3(fmi3InstanceEnvironment env, fmi3Status status, fmi3String category, fmi3String message)
{
    (void)env;
    fprintf(stderr, "LOG status=%d category=%s: %s\n", (int)status, category ? category : "(null)",
            message ? message : "(null)");
    if (status >= fmi3Error) ++errors_logged;
}

typedef struct {
    int version;
    void *lib;
    /* FMI 2 */
    fmi2InstantiateTYPE *instantiate2;
    fmi2FreeInstanceTYPE *free2;
    fmi2SetupExperimentTYPE *setup2;
    fmi2EnterInitializationModeTYPE *enter2;
    fmi2ExitInitializationModeTYPE *exit2;
    fmi2TerminateTYPE *terminate2;
    fmi2GetRealTYPE *get2;
    fmi2SetRealTYPE *set2;
    fmi2DoStepTYPE *step2;
    fmi2GetFMUstateTYPE *getstate2;
    fmi2SetFMUstateTYPE *setstate2;
    fmi2FreeFMUstateTYPE *freestate2;
    fmi2SerializedFMUstateSizeTYPE *size2;
    fmi2SerializeFMUstateTYPE *serialize2;
    fmi2DeSerializeFMUstateTYPE *deserialize2;
    /* FMI 3 */
    fmi3InstantiateCoSimulationTYPE *instantiate3;
    fmi3FreeInstanceTYPE *free3;
    fmi3EnterInitializationModeTYPE *enter3;
    fmi3ExitInitializationModeTYPE *exit3;
    fmi3TerminateTYPE *terminate3;
    fmi3GetFloat64TYPE *get3;
    fmi3SetFloat64TYPE *set3;
    fmi3DoStepTYPE *step3;
    fmi3GetFMUStateTYPE *getstate3;
    fmi3SetFMUStateTYPE *setstate3;
    fmi3FreeFMUStateTYPE *freestate3;
    fmi3SerializedFMUStateSizeTYPE *size3;
    fmi3SerializeFMUStateTYPE *serialize3;
    fmi3DeserializeFMUStateTYPE *deserialize3;
} api;

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "host: symbol %s not found: %s\n", name, dlerror());
        exit(3);
    }
    return p;
}

static void load(api *a, int version, const char *path)
{
    memset(a, 0, sizeof *a);
    a->version = version;
    a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        fprintf(stderr, "host: dlopen(%s) failed: %s\n", path, dlerror());
        exit(3);
    }
    if (version == 2) {
        a->instantiate2 = (fmi2InstantiateTYPE *)sym(a->lib, "fmi2Instantiate");
        a->free2 = (fmi2FreeInstanceTYPE *)sym(a->lib, "fmi2FreeInstance");
        a->setup2 = (fmi2SetupExperimentTYPE *)sym(a->lib, "fmi2SetupExperiment");
        a->enter2 = (fmi2EnterInitializationModeTYPE *)sym(a->lib, "fmi2EnterInitializationMode");
        a->exit2 = (fmi2ExitInitializationModeTYPE *)sym(a->lib, "fmi2ExitInitializationMode");
        a->terminate2 = (fmi2TerminateTYPE *)sym(a->lib, "fmi2Terminate");
        a->get2 = (fmi2GetRealTYPE *)sym(a->lib, "fmi2GetReal");
        a->set2 = (fmi2SetRealTYPE *)sym(a->lib, "fmi2SetReal");
        a->step2 = (fmi2DoStepTYPE *)sym(a->lib, "fmi2DoStep");
        a->getstate2 = (fmi2GetFMUstateTYPE *)sym(a->lib, "fmi2GetFMUstate");
        a->setstate2 = (fmi2SetFMUstateTYPE *)sym(a->lib, "fmi2SetFMUstate");
        a->freestate2 = (fmi2FreeFMUstateTYPE *)sym(a->lib, "fmi2FreeFMUstate");
        a->size2 = (fmi2SerializedFMUstateSizeTYPE *)sym(a->lib, "fmi2SerializedFMUstateSize");
        a->serialize2 = (fmi2SerializeFMUstateTYPE *)sym(a->lib, "fmi2SerializeFMUstate");
        a->deserialize2 = (fmi2DeSerializeFMUstateTYPE *)sym(a->lib, "fmi2DeSerializeFMUstate");
    } else {
        a->instantiate3 = (fmi3InstantiateCoSimulationTYPE *)sym(a->lib, "fmi3InstantiateCoSimulation");
        a->free3 = (fmi3FreeInstanceTYPE *)sym(a->lib, "fmi3FreeInstance");
        a->enter3 = (fmi3EnterInitializationModeTYPE *)sym(a->lib, "fmi3EnterInitializationMode");
        a->exit3 = (fmi3ExitInitializationModeTYPE *)sym(a->lib, "fmi3ExitInitializationMode");
        a->terminate3 = (fmi3TerminateTYPE *)sym(a->lib, "fmi3Terminate");
        a->get3 = (fmi3GetFloat64TYPE *)sym(a->lib, "fmi3GetFloat64");
        a->set3 = (fmi3SetFloat64TYPE *)sym(a->lib, "fmi3SetFloat64");
        a->step3 = (fmi3DoStepTYPE *)sym(a->lib, "fmi3DoStep");
        a->getstate3 = (fmi3GetFMUStateTYPE *)sym(a->lib, "fmi3GetFMUState");
        a->setstate3 = (fmi3SetFMUStateTYPE *)sym(a->lib, "fmi3SetFMUState");
        a->freestate3 = (fmi3FreeFMUStateTYPE *)sym(a->lib, "fmi3FreeFMUState");
        a->size3 = (fmi3SerializedFMUStateSizeTYPE *)sym(a->lib, "fmi3SerializedFMUStateSize");
        a->serialize3 = (fmi3SerializeFMUStateTYPE *)sym(a->lib, "fmi3SerializeFMUState");
        a->deserialize3 = (fmi3DeserializeFMUStateTYPE *)sym(a->lib, "fmi3DeserializeFMUState");
    }
}

static fmi2CallbackFunctions callbacks2 = {host_logger2, calloc, free, NULL, NULL};

static void *instantiate(const api *a, const char *name, const char *token, const char *resources)
{
    if (a->version == 2)
        return a->instantiate2(name, fmi2CoSimulation, token, resources, &callbacks2, fmi2False,
                               fmi2False);
    return a->instantiate3(name, token, resources, fmi3False, fmi3False, fmi3False, fmi3False, NULL, 0, NULL,
                           host_logger3, NULL);
}

static void free_instance(const api *a, void *c)
{
    if (a->version == 2) a->free2(c);
    else a->free3(c);
}

static int enter_init(const api *a, void *c, double t0)
{
    if (a->version == 2) {
        if (a->setup2(c, fmi2False, 0.0, t0, fmi2False, 0.0) != fmi2OK) return -1;
        return a->enter2(c) == fmi2OK ? 0 : -1;
    }
    return a->enter3(c, fmi3False, 0.0, t0, fmi3False, 0.0) == fmi3OK ? 0 : -1;
}

static int exit_init(const api *a, void *c)
{
    return (a->version == 2 ? (int)a->exit2(c) : (int)a->exit3(c)) == 0 ? 0 : -1;
}

static int terminate(const api *a, void *c)
{
    return (a->version == 2 ? (int)a->terminate2(c) : (int)a->terminate3(c)) == 0 ? 0 : -1;
}

static int set_real(const api *a, void *c, unsigned vr, double value)
{
    if (a->version == 2) {
        fmi2ValueReference r = vr;
        return a->set2(c, &r, 1, &value) == fmi2OK ? 0 : -1;
    }
    fmi3ValueReference r = vr;
    return a->set3(c, &r, 1, &value, 1) == fmi3OK ? 0 : -1;
}

static int get_reals(const api *a, void *c, const unsigned *vr, size_t n, double *y)
{
    if (n == 0) return 0;
    if (a->version == 2) {
        fmi2ValueReference r[MAX_VARS];
        for (size_t i = 0; i < n; ++i) r[i] = vr[i];
        return a->get2(c, r, n, y) == fmi2OK ? 0 : -1;
    }
    fmi3ValueReference r[MAX_VARS];
    for (size_t i = 0; i < n; ++i) r[i] = vr[i];
    return a->get3(c, r, n, y, n) == fmi3OK ? 0 : -1;
}

/* Returns the FMI status (0 OK). */
static int do_step(const api *a, void *c, double t, double h)
{
    if (a->version == 2) return (int)a->step2(c, t, h, fmi2True);
    fmi3Boolean event = fmi3True, terminate_now = fmi3True, early = fmi3True;
    fmi3Float64 reached = -1.0;
    int status = (int)a->step3(c, t, h, fmi3True, &event, &terminate_now, &early, &reached);
    if (status == 0 && (event || terminate_now || early || reached != t + h)) {
        /* reached is computed as t0 + i * h_internal by the FMU; allow round-off only */
        double d = reached - (t + h);
        if (event || terminate_now || early || d > 1e-12 * (1.0 + t) || d < -1e-12 * (1.0 + t)) {
            fprintf(stderr, "host: fmi3DoStep flags event=%d terminate=%d early=%d reached=%.17g (expected %.17g)\n",
                    (int)event, (int)terminate_now, (int)early, reached, t + h);
            return 99;
        }
    }
    return status;
}

/* Round trip of the FMU state: returns 0 when the redone step is bit-identical. */
static int state_round_trip(const api *a, void *c, double t, double h, const unsigned *out, size_t n_out)
{
    double y1[MAX_VARS], y2[MAX_VARS];
    size_t size = 0;
    unsigned char *buffer;
    if (a->version == 2) {
        fmi2FMUstate s = NULL, s2 = NULL;
        if (a->getstate2(c, &s) != fmi2OK || a->size2(c, s, &size) != fmi2OK) return 3;
        buffer = (unsigned char *)malloc(size);
        if (!buffer || a->serialize2(c, s, (fmi2Byte *)buffer, size) != fmi2OK) return 3;
        if (a->deserialize2(c, (const fmi2Byte *)buffer, size, &s2) != fmi2OK) return 3;
        free(buffer);
        if (a->step2(c, t, h, fmi2False) != fmi2OK || get_reals(a, c, out, n_out, y1)) return 3;
        if (a->setstate2(c, s2) != fmi2OK) return 3;
        if (a->step2(c, t, h, fmi2False) != fmi2OK || get_reals(a, c, out, n_out, y2)) return 3;
        if (a->setstate2(c, s) != fmi2OK) return 3; /* back to t for the caller */
        if (a->freestate2(c, &s) != fmi2OK || a->freestate2(c, &s2) != fmi2OK || s || s2) return 3;
    } else {
        fmi3FMUState s = NULL, s2 = NULL;
        fmi3Boolean e, tt, early;
        fmi3Float64 reached;
        if (a->getstate3(c, &s) != fmi3OK || a->size3(c, s, &size) != fmi3OK) return 3;
        buffer = (unsigned char *)malloc(size);
        if (!buffer || a->serialize3(c, s, buffer, size) != fmi3OK) return 3;
        if (a->deserialize3(c, buffer, size, &s2) != fmi3OK) return 3;
        free(buffer);
        if (a->step3(c, t, h, fmi3False, &e, &tt, &early, &reached) != fmi3OK || get_reals(a, c, out, n_out, y1))
            return 3;
        if (a->setstate3(c, s2) != fmi3OK) return 3;
        if (a->step3(c, t, h, fmi3False, &e, &tt, &early, &reached) != fmi3OK || get_reals(a, c, out, n_out, y2))
            return 3;
        if (a->setstate3(c, s) != fmi3OK) return 3;
        if (a->freestate3(c, &s) != fmi3OK || a->freestate3(c, &s2) != fmi3OK || s || s2) return 3;
    }
    if (memcmp(y1, y2, sizeof(double) * n_out) != 0) {
        fprintf(stderr, "host: the step redone from a deserialized state differs\n");
        return 4;
    }
    return 0;
}

typedef struct {
    long k;
    unsigned vr;
    double value;
} change;

static void usage(void)
{
    fprintf(stderr, "usage: fmu_host -v 2|3 -l LIB -t TOKEN -r RESOURCES -H STEP -n N [-c CYCLES] [-s VR=VALUE] "
                    "[-m K:VR=VALUE] [-o VR] [-x BAD_STEP] [-S] [-G]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int version = 0, cycles = 1, exercise_state = 0, wrong_token = 0;
    const char *lib = NULL, *token = NULL, *resources = "";
    double h = 0.0, bad_step = 0.0;
    long n = 0;
    unsigned set_vr[MAX_VARS], out[MAX_VARS];
    double set_value[MAX_VARS];
    change changes[MAX_VARS];
    size_t n_set = 0, n_out = 0, n_changes = 0;
    for (int i = 1; i < argc; ++i) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-S")) { exercise_state = 1; continue; }
        if (!strcmp(o, "-G")) { wrong_token = 1; continue; }
        if (!v) usage();
        ++i;
        if (!strcmp(o, "-v")) version = atoi(v);
        else if (!strcmp(o, "-l")) lib = v;
        else if (!strcmp(o, "-t")) token = v;
        else if (!strcmp(o, "-r")) resources = v;
        else if (!strcmp(o, "-H")) h = strtod(v, NULL);
        else if (!strcmp(o, "-n")) n = strtol(v, NULL, 10);
        else if (!strcmp(o, "-c")) cycles = atoi(v);
        else if (!strcmp(o, "-x")) bad_step = strtod(v, NULL);
        else if (!strcmp(o, "-o") && n_out < MAX_VARS) out[n_out++] = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(o, "-s") && n_set < MAX_VARS) {
            if (sscanf(v, "%u=%lf", &set_vr[n_set], &set_value[n_set]) != 2) usage();
            ++n_set;
        } else if (!strcmp(o, "-m") && n_changes < MAX_VARS) {
            change *ch = &changes[n_changes++];
            if (sscanf(v, "%ld:%u=%lf", &ch->k, &ch->vr, &ch->value) != 3) usage();
        } else usage();
    }
    if ((version != 2 && version != 3) || !lib || !token || !(h > 0.0) || n < 1 || cycles < 1) usage();

    api a;
    load(&a, version, lib);

    if (wrong_token) {
        int before = errors_logged;
        void *c = instantiate(&a, "wrong_token", "{00000000-0000-0000-0000-000000000000}", resources);
        if (c || errors_logged == before) {
            fprintf(stderr, "host: a wrong GUID/token was accepted or not logged\n");
            if (c) free_instance(&a, c);
            return 3;
        }
    }

    double *first = (double *)malloc(sizeof(double) * (size_t)(n + 1) * (n_out > 0 ? n_out : 1));
    double *row = (double *)malloc(sizeof(double) * (n_out > 0 ? n_out : 1));
    if (!first || !row) return 3;
    int rc = 0;
    for (int cycle = 0; cycle < cycles && rc == 0; ++cycle) {
        void *c = instantiate(&a, "host", token, resources);
        if (!c) {
            fprintf(stderr, "host: instantiation failed in cycle %d\n", cycle);
            rc = 3;
            break;
        }
        for (size_t k = 0; k < n_set && rc == 0; ++k)
            if (set_real(&a, c, set_vr[k], set_value[k])) rc = 3;
        if (rc == 0 && (enter_init(&a, c, 0.0) || exit_init(&a, c))) rc = 3;
        double t = 0.0;
        for (long i = 0; i <= n && rc == 0; ++i) {
            if (i > 0) {
                if (bad_step > 0.0 && i == 1) {
                    int before = errors_logged;
                    int status = do_step(&a, c, t, bad_step);
                    if (status != 3 || errors_logged == before) {
                        fprintf(stderr, "host: doStep with the invalid step %.17g returned %d (logged %d errors)\n",
                                bad_step, status, errors_logged - before);
                        rc = 3;
                        break;
                    }
                }
                if (exercise_state && i == n / 2 + 1 && (rc = state_round_trip(&a, c, t, h, out, n_out)) != 0)
                    break;
                int status = do_step(&a, c, t, h);
                if (status != 0) {
                    fprintf(stderr, "host: doStep(%.17g, %.17g) returned %d\n", t, h, status);
                    rc = 3;
                    break;
                }
                t = (double)i * h;
            }
            for (size_t k = 0; k < n_changes; ++k)
                if (changes[k].k == i && set_real(&a, c, changes[k].vr, changes[k].value)) rc = 3;
            if (rc || get_reals(&a, c, out, n_out, row)) {
                rc = 3;
                break;
            }
            double *dest = first + (size_t)i * n_out;
            if (cycle == 0) {
                memcpy(dest, row, sizeof(double) * n_out);
                printf("%.17g", t);
                for (size_t k = 0; k < n_out; ++k) printf(" %.17g", row[k]);
                printf("\n");
            } else if (memcmp(dest, row, sizeof(double) * n_out) != 0) {
                fprintf(stderr, "host: cycle %d differs from the first at communication point %ld\n", cycle, i);
                rc = 4;
            }
        }
        if (rc == 0 && terminate(&a, c)) rc = 3;
        free_instance(&a, c);
    }
    free(first);
    free(row);
    dlclose(a.lib);
    if (rc == 0) printf("DONE cycles=%d errors_logged=%d\n", cycles, errors_logged);
    return rc;
}
