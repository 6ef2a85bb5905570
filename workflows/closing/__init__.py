"""Closing a device incident: wait for the device to heal or its vendor to fix it, the vendor ticket and its
weeks-long wait (carried across runs), and a device nothing can see."""
