/* What the runtime libraries' products share (kernels.c: small products; packed.c:
 * large float products): one vector register of each element type, as wide as the
 * target's (64 bytes with AVX-512, 32 with AVX, else 16), as GCC's vector extension.
 * A type wider than the target's registers is not split into registers: GCC spills it
 * to the stack element by element (25x slower products on an AVX2 machine). */
#ifndef PULLBACK_KERNELS_H
#define PULLBACK_KERNELS_H

#define _POSIX_C_SOURCE 200112L /* posix_memalign */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__)
#define PB_VEC_BYTES 64
#elif defined(__AVX__)
#define PB_VEC_BYTES 32
#else
#define PB_VEC_BYTES 16
#endif

#define PB_VECTOR(S, T)                                                                   \
    typedef T pb_vec_##S __attribute__((vector_size(PB_VEC_BYTES), aligned(sizeof(T))));  \
    enum { PB_LANES_##S = PB_VEC_BYTES / sizeof(T) };
PB_VECTOR(float32, float)
PB_VECTOR(float64, double)
PB_VECTOR(int32, int32_t)
PB_VECTOR(int64, int64_t)
#undef PB_VECTOR

#endif
