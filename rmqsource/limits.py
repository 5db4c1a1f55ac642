"""Bounds that every length read from disk or from a user is checked against.

RocketMQ's own limits (MessageStoreConfig defaults and the encoder's checks)
plus the bounds rmqsource adds so that hostile bytes can never make a loop run
forever or a buffer grow without end.
"""

# Topic: int8 length field for magic v1; v2 (5.x) allows 2-byte lengths, and the
# broker accepts more than 127 bytes only for %RETRY% topics, up to 255.
TOPIC_MAX_BYTES_V1 = 127
TOPIC_MAX_BYTES_V2 = 255
# Properties length is an int16 on disk (Short.MAX_VALUE).
PROPERTIES_MAX_BYTES = 32767
# maxMessageSize default (4 MiB); a whole record may be this plus 64 KiB.
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
RECORD_HEADROOM_BYTES = 64 * 1024
# Smallest possible record: v1 magic, IPv4 hosts, empty body/topic/properties.
MIN_RECORD_BYTES = 91
# A blank end-of-segment record is int32 size + int32 magic.
END_FILE_MIN_BLANK_BYTES = 8
# Upper bound for records read from stores whose writer used a bigger
# maxMessageSize; anything larger is treated as corrupt.
MAX_RECORD_BYTES_READ = 1 << 30
# Decompressed bodies are capped (zip-bomb guard); override per call.
DEFAULT_MAX_INFLATED_BODY_BYTES = 64 * 1024 * 1024
# Spark reads with decompress=true: a batch is flushed early once its bodies reach this many bytes,
# and a task fails (DecompressionError) once it has inflated this many bytes in all.
DEFAULT_MAX_INFLATED_BATCH_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_INFLATED_TASK_BYTES = 32 * 1024 * 1024 * 1024
# Arrow binary arrays (the body column) hold at most 2 GiB - 1 bytes.
MAX_ARROW_BINARY_BYTES = (1 << 31) - 1
# Index hash chains are walked at most this many steps per file (loops in
# hostile files end here instead of spinning).
MAX_INDEX_CHAIN_STEPS = 1_000_000
# Segment lists longer than this are refused as hostile.
MAX_SEGMENTS = 1_000_000
# maxMsgsNumBatch default for key queries.
DEFAULT_MAX_MSGS_NUM_BATCH = 64
