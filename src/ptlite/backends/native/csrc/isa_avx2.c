/* The AVX2 + FMA kernels (x86-64 only; chosen at run time when the CPU reports both). */
#if defined(__x86_64__) || defined(_M_X64)
#pragma GCC target("avx2,fma")
#define PL_VW 8
#define PL_NV 2
#define PL_MR 6
#define PL_NAME avx2
#define PL_ISA_LABEL "avx2"
#include "kernels.inc"
#endif
