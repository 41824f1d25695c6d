/* dlsym_trampoline.S: the preload's dlsym (see dlsym_hook.h).

   dlsym(handle, name) calls replay_dlsym_hook(handle, name), which returns two
   pointers: a replacement for the lookup, or null and the C library's dlsym.
   A replacement is returned; otherwise the arguments are put back and the
   C library's dlsym is entered by a jump, so that it runs as if called by the
   application: same registers, same return address, same stack.

   Not compiled with the sanitizers' instrumentation: a sanitizer runtime calls
   dlsym during its own start-up. */

#if defined(__x86_64__)

#if defined(__CET__)
#include <cet.h>
#else
#define _CET_ENDBR
#endif

        .text
        .globl  dlsym
        .type   dlsym, @function
        .p2align 4
dlsym:
        .cfi_startproc
        _CET_ENDBR
        /* On entry %rsp is 8 past a 16-byte boundary; two pushes and 8 bytes
           put it on one for the call. */
        pushq   %rdi
        .cfi_adjust_cfa_offset 8
        pushq   %rsi
        .cfi_adjust_cfa_offset 8
        subq    $8, %rsp
        .cfi_adjust_cfa_offset 8
        call    replay_dlsym_hook@PLT
        addq    $8, %rsp
        .cfi_adjust_cfa_offset -8
        popq    %rsi
        .cfi_adjust_cfa_offset -8
        popq    %rdi
        .cfi_adjust_cfa_offset -8
        testq   %rax, %rax
        jnz     1f
        jmp     *%rdx
1:
        ret
        .cfi_endproc
        .size   dlsym, .-dlsym

#elif defined(__aarch64__)

        .text
        .globl  dlsym
        .type   dlsym, %function
        .p2align 2
dlsym:
        .cfi_startproc
        hint    #34                     /* bti c */
        stp     x29, x30, [sp, #-32]!
        .cfi_def_cfa_offset 32
        .cfi_offset 29, -32
        .cfi_offset 30, -24
        mov     x29, sp
        stp     x0, x1, [sp, #16]
        bl      replay_dlsym_hook
        cbnz    x0, 1f
        mov     x16, x1                 /* x16: a valid target register under BTI */
        ldp     x0, x1, [sp, #16]
        .cfi_remember_state
        ldp     x29, x30, [sp], #32
        .cfi_restore 29
        .cfi_restore 30
        .cfi_def_cfa_offset 0
        br      x16
1:
        .cfi_restore_state
        ldp     x29, x30, [sp], #32
        .cfi_restore 29
        .cfi_restore 30
        .cfi_def_cfa_offset 0
        ret
        .cfi_endproc
        .size   dlsym, .-dlsym

#endif

        .section .note.GNU-stack,"",%progbits
