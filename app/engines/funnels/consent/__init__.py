"""The consent gate every outgoing message passes (FN-31, FN-32): ``policy.py`` decides (pure),
``gate.py`` loads what it needs for a batch and takes the frequency cap's slots."""
