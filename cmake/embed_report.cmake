# Writes OUT, a C++ header holding the report page's files (HTML, CSS, JS) as
# raw string literals, so that `attnlab report` needs no file beside the
# executable. Run as: cmake -DHTML=... -DCSS=... -DJS=... -DOUT=... -P embed_report.cmake
set(delimiter "attnlab_asset")
set(body "#pragma once\n// Generated from cli/report/ by cmake/embed_report.cmake: do not edit.\n")
string(APPEND body "namespace attnlab::cli::report_assets {\n")
foreach(kind HTML CSS JS)
  file(READ "${${kind}}" text)
  string(FIND "${text}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${${kind}} contains the raw-string delimiter )${delimiter}\"")
  endif()
  string(APPEND body "inline constexpr const char* k${kind} = R\"${delimiter}(${text})${delimiter}\";\n")
endforeach()
string(APPEND body "}  // namespace attnlab::cli::report_assets\n")
file(WRITE "${OUT}" "${body}")
