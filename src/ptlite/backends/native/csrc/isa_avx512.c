/* The AVX-512 kernels (x86-64 only; chosen at run time when the CPU reports AVX-512 F). */
#if defined(__x86_64__) || defined(_M_X64)
#if defined(PL_AVX512_AS_AVX2)  /* a test build: this table's code at its width, on an AVX2 machine */
#pragma GCC target("avx2,fma")
#else
#pragma GCC target("avx512f,avx2,fma")
#endif
#define PL_VW 16
#define PL_NV 1
#define PL_MR 8
#define PL_NAME avx512
#define PL_ISA_LABEL "avx512"
#include "kernels.inc"
#endif
