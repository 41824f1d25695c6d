# Compiler settings shared by every replay target, and the helpers that name test
# and benchmark targets after their source file.

set(REPLAY_WARNINGS -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wcast-align
    -Wunused -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough)
if(REPLAY_WERROR)
  list(APPEND REPLAY_WARNINGS -Werror)
endif()

if(REPLAY_SANITIZE)
  add_compile_options(-fsanitize=${REPLAY_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${REPLAY_SANITIZE})
  # -O1 with line tables only: what the sanitizers' own documentation suggests,
  # with stack traces that still name files and lines, built in half the time
  # that -O2 -g takes under instrumentation.
  foreach(lang C CXX)
    string(REPLACE "-O2 -g" "-O1 -g1" CMAKE_${lang}_FLAGS_RELWITHDEBINFO "${CMAKE_${lang}_FLAGS_RELWITHDEBINFO}")
  endforeach()
  # GCC's flow analysis under ASan reports maybe-uninitialized inside libstdc++
  # (std::regex, std::function) where nothing is uninitialized.
  list(APPEND REPLAY_WARNINGS -Wno-maybe-uninitialized)
  if(REPLAY_SANITIZE MATCHES "address")
    # An ASan-built preload only works when the ASan runtime is loaded first, so
    # `replay` puts the runtime ahead of the interposer in LD_PRELOAD.
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libasan.so
                    OUTPUT_VARIABLE REPLAY_ASAN_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE)
    get_filename_component(REPLAY_ASAN_RUNTIME "${REPLAY_ASAN_RUNTIME}" REALPATH)
    add_compile_definitions(REPLAY_PRELOAD_RUNTIME="${REPLAY_ASAN_RUNTIME}")
  endif()
endif()

# replay_target_defaults(target): warnings and include roots for our own code.
function(replay_target_defaults target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${REPLAY_WARNINGS}>)
endfunction()

# replay_recording_path(target): code that runs inside every recorded call
# (the preload and the core library linked into it).
# - Thread-locals live in the static TLS block: the preload is loaded at
#   start-up (LD_PRELOAD), so an access is an offset from the thread pointer
#   instead of a call to __tls_get_addr. They take a few hundred bytes, within
#   what glibc keeps spare should the preload be dlopen()ed instead.
# - GCC zeroes small records and plans on the stack with 16-byte stores: its
#   generic choice, `rep stos`, costs more to start than the few hundred bytes
#   it clears, and 8-byte stores take twice the instructions.
function(replay_recording_path target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-ftls-model=initial-exec>)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-mmemset-strategy=vector_loop:512:noalign,libcall:-1:noalign>)
  endif()
endfunction()
