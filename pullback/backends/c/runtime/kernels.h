/* What the runtime libraries' products share (kernels.c: small products; packed.c:
 * large float products): one vector register of each element type (64 bytes: AVX-512,
 * or two or four narrower registers elsewhere) as GCC's vector extension. */
#ifndef PULLBACK_KERNELS_H
#define PULLBACK_KERNELS_H

#define _POSIX_C_SOURCE 200112L /* posix_memalign */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PB_VECTOR(S, T)                                                                   \
    typedef T pb_vec_##S __attribute__((vector_size(64), aligned(sizeof(T))));            \
    enum { PB_LANES_##S = 64 / sizeof(T) };
PB_VECTOR(float32, float)
PB_VECTOR(float64, double)
PB_VECTOR(int32, int32_t)
PB_VECTOR(int64, int64_t)
#undef PB_VECTOR

#endif
