/* The portable kernels: 128-bit GNU C vectors, which are SSE2 on x86-64, NEON on aarch64 and plain scalar code
 * elsewhere. Always built, always correct: the fallback of every other table. */
#define PL_VW 4
#define PL_NV 2
#define PL_MR 6
#define PL_NAME generic
#if defined(__aarch64__)
#define PL_ISA_LABEL "neon"
#else
#define PL_ISA_LABEL "generic"
#endif
#include "kernels.inc"
