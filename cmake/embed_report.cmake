# Writes OUT, a C++ header holding the report page's files from DIR (report.html,
# report.css and the scripts *.js as one script) as raw string literals, so that
# `attnlab report` needs no file beside the executable. The scripts are joined
# in name order with main.js, which draws the page, last: every other file only
# declares. Run as: cmake -DDIR=cli/report -DOUT=... -P embed_report.cmake
set(delimiter "attnlab_asset")
file(GLOB scripts "${DIR}/*.js")
list(SORT scripts)
list(REMOVE_ITEM scripts "${DIR}/main.js")
list(APPEND scripts "${DIR}/main.js")
set(JS_TEXT "")
foreach(script ${scripts})
  file(READ "${script}" text)
  string(APPEND JS_TEXT "${text}\n")
endforeach()
file(READ "${DIR}/report.html" HTML_TEXT)
file(READ "${DIR}/report.css" CSS_TEXT)
set(body "#pragma once\n// Generated from cli/report/ by cmake/embed_report.cmake: do not edit.\n")
string(APPEND body "namespace attnlab::cli::report_assets {\n")
foreach(kind HTML CSS JS)
  string(FIND "${${kind}_TEXT}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "the report's ${kind} contains the raw-string delimiter )${delimiter}\"")
  endif()
  string(APPEND body "inline constexpr const char* k${kind} = R\"${delimiter}(${${kind}_TEXT})${delimiter}\";\n")
endforeach()
string(APPEND body "}  // namespace attnlab::cli::report_assets\n")
file(WRITE "${OUT}" "${body}")
