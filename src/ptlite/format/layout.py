"""The .ptlite file layout: constants shared by the writer and the reader (documented in docs/file-format.md).

    offset  size  field
    0       8     magic b"\\x89PTLITE\\n"
    8       4     format version (u32, little-endian)
    12      4     flags (u32, 0)
    16      8     program offset (u64)   -- UTF-8 JSON describing methods, weights table and metadata
    24      8     program size (u64)
    32      8     data offset (u64)      -- weights, each aligned to ALIGN bytes
    40      8     data size (u64)
    48      4     CRC-32 of the program JSON (u32)
    52      12    reserved, zero
    64      ...   program JSON, then zero padding, then the data section
"""

import struct

MAGIC = b"\x89PTLITE\n"
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sIIQQQQI12s")
HEADER_SIZE = HEADER.size  # 64
ALIGN = 64
MAX_PROGRAM_BYTES = 256 * 1024 * 1024  # a program JSON larger than this is refused before it is read
WEIGHT_DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "bool")

assert HEADER_SIZE == 64


def align(n: int) -> int:
    """Round n up to the next multiple of ALIGN."""
    return (n + ALIGN - 1) // ALIGN * ALIGN

# Program metadata key: the least ptlite version that runs the file (its operators' newest `@since`); older readers
# that know the key refuse the file naming the version to upgrade to, before reading its methods.
MIN_VERSION_KEY = "min_ptlite_version"
