"""Names the body modules share (docs/bodies.md)."""

FORMATS = ("json", "avro", "text")
WIRE_FORMATS = ("plain", "confluent")
POLICIES = ("fail", "null", "skip")
DECODE_ERROR_COLUMN = "_decodeError"      # onBadRecord=null: why the row's body did not decode
TEXT_COLUMN = "bodyText"                  # bodyFormat=text: the one decoded column
# lower-case option name -> documented name (contract.json's "options" holds the same)
BODY_OPTIONS = {"bodyformat": "bodyFormat", "bodyschema": "bodySchema", "bodyschemafile": "bodySchemaFile",
                "bodyschemabytopic": "bodySchemaByTopic", "bodywireformat": "bodyWireFormat",
                "bodycolumnprefix": "bodyColumnPrefix", "onbadrecord": "onBadRecord"}
