"""Capture-level ("dynamo") workarounds; importing this package registers them."""
