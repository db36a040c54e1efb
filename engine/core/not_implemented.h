// SPDX-License-Identifier: MIT
/**
 * @file not_implemented.h
 * @brief The stub a student starter tree puts where a lab's solution was
 *        (tools/make_starter.py): it fails naming the lab and the part to write.
 *
 * A macro rather than a call to fail(), because some regions sit in functions
 * that CUDA kernels call too (KVView::row): on the device there is no
 * exception to throw, so a kernel that reaches a stub traps, and the host
 * side of the same function throws servelab::NotImplemented with the message.
 */
#pragma once

#include "core/error.h"

#if defined(__CUDA_ARCH__)
/// Device code: stop the kernel (the launch then fails with an illegal instruction).
#define SERVELAB_NOT_IMPLEMENTED(message) \
  do {                                    \
    __trap();                             \
    __builtin_unreachable();              \
  } while (0)
#else
/// Host code: throws servelab::NotImplemented(@p message), e.g. "not implemented: lab 04, BlockPool::get_new_blocks".
#define SERVELAB_NOT_IMPLEMENTED(message) throw ::servelab::NotImplemented(message)
#endif
