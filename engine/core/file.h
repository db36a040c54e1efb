// SPDX-License-Identifier: MIT
/**
 * @file file.h
 * @brief Opening a file that came from a flag or a model folder without
 *        trusting what it is: a FIFO blocks open() and read() for ever, and a
 *        device such as /dev/zero never ends, so both are refused by name
 *        before a byte is read, and a regular file's size is bounded first.
 */
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace servelab {

/**
 * @brief Opens @p path read-only and returns its descriptor (the caller closes it).
 *
 * Opened with O_NONBLOCK so a FIFO without a writer does not block the open;
 * then fstat() must say it is a regular file of at most @p max_bytes.
 * @param what what the file should be, for the error ("a Hugging Face config.json").
 * @param size_bytes receives the file's size in bytes.
 * @throws Error "<path>: is a FIFO (expected <what>, a regular file)", or cannot open, or too large.
 */
int open_regular_file(const std::filesystem::path& path, std::size_t max_bytes, const std::string& what,
                      std::size_t& size_bytes);

/**
 * @brief The whole of a regular file of at most @p max_bytes bytes (see open_regular_file()).
 * @throws Error naming @p path and @p what when it is not such a file or cannot be read.
 */
std::string read_regular_file(const std::filesystem::path& path, std::size_t max_bytes, const std::string& what);

}  // namespace servelab
