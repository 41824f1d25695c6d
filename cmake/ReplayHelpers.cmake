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
endif()

# replay_target_defaults(target): warnings and include roots for our own code.
function(replay_target_defaults target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${REPLAY_WARNINGS}>)
endfunction()
