"""``podmedic admission``: the mutating webhook that holds a replacement pod on its node."""
