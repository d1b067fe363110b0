"""What goes out (relay/export/): the same spans over OTLP."""
