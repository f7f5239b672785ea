# Writes a program's manual page: `PROGRAM man` into OUTPUT (roff), failing the build
# when the program cannot say it. Run by the top-level CMakeLists.txt after ddpd and
# ddpctl are built (their pages are written from their own --help tables and texts).
execute_process(COMMAND ${PROGRAM} man OUTPUT_FILE ${OUTPUT} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUTPUT})
  message(FATAL_ERROR "${PROGRAM} man: exit status ${rc}: ${err}")
endif()
