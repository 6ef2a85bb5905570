"""The node side: a node's watch that escalates to a node incident, its quarantine, device-plugin devices,
and a node's announced maintenance."""
