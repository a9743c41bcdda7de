# Writes SAGE_VERSION_STRING ("<release>+<commit>[-dirty]") into OUTPUT when
# it changed. Run at build time (not configure time) so that every build of a
# new commit carries its own identity, which JIT cache keys depend on.
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE commit
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed OR NOT commit)
  set(commit unknown)
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no
    WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes)
    set(commit "${commit}-dirty")
  endif()
endif()
set(text "#define SAGE_VERSION_STRING \"${VERSION}+${commit}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
