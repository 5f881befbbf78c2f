#pragma once
// What attnlab accepts as the text of a data file or a saved vocabulary:
// well-formed UTF-8 (Unicode's table 3-7: no stray continuation bytes,
// truncated or overlong sequences, surrogates or code points past U+10FFFF)
// without NUL bytes. Anything else is refused when the file is loaded, before
// step 1: its tokens would otherwise reach the checkpoint's JSON metadata,
// which cannot hold them, only when the first checkpoint is written.
#include <cstddef>
#include <string>

namespace attnlab {

// "" when `text` is such text; otherwise where and why it is not:
// "line N (byte offset K): not valid UTF-8 (bytes 0xC3 0x28)" or
// "line N (byte offset K): a NUL byte (0x00), so this is not a text file".
// Lines and offsets count from the file's start, a BOM included.
std::string utf8_text_problem(const std::string& text);

// Whether `text` is well-formed UTF-8 (NUL bytes allowed).
bool is_utf8(const std::string& text);

// `text` without a UTF-8 byte-order mark (EF BB BF) at its start: it marks
// the encoding, it is not a character of the text.
std::string without_bom(std::string text);

}  // namespace attnlab
