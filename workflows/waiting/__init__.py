"""Everything an incident waits on before it acts: an operator's approval, the fleet guard's permit
(device and node), a storm's turn. Each waits through ``wait.py``'s one primitive."""
