"""Support code below every floor (MLIR's Support): nothing here knows about IR or ML."""
