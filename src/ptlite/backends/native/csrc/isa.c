/* Which instruction set's kernels run: the best this CPU reports at load (one binary serves every x86-64 machine),
 * or the one named by PTLITE_NATIVE_ISA, or by pl_isa_select (the tests run every table the CPU supports). */
#include <stdlib.h>
#include <string.h>

#include "native.h"

static const pl_isa *const all[] = {
#ifdef PL_X86
    &pl_isa_avx512,
    &pl_isa_avx2,
#endif
    &pl_isa_generic,
};

static const pl_isa *current;

const pl_isa *const *pl_isa_all(size_t *count)
{
    *count = sizeof all / sizeof all[0];
    return all;
}

int pl_isa_supported(const pl_isa *isa)
{
#ifdef PL_X86
    __builtin_cpu_init();
#if defined(PL_AVX512_AS_AVX2)
    if (isa == &pl_isa_avx512) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    if (isa == &pl_isa_avx512) return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2")
                                      && __builtin_cpu_supports("fma");
#endif
    if (isa == &pl_isa_avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return isa == &pl_isa_generic;
}

int pl_isa_select(const char *name)
{
    size_t n;
    const pl_isa *const *list = pl_isa_all(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i]->name, name) == 0 && pl_isa_supported(list[i])) {
            current = list[i];
            return 0;
        }
    return -1;
}

const pl_isa *pl_isa_current(void)
{
    if (!current) {
        const char *forced = getenv("PTLITE_NATIVE_ISA");
        if (!(forced && *forced && pl_isa_select(forced) == 0)) {
            size_t n;
            const pl_isa *const *list = pl_isa_all(&n);
            for (size_t i = 0; i < n && !current; i++)
                if (pl_isa_supported(list[i])) current = list[i];
        }
    }
    return current;
}
