"""VirtualWire: connect and disconnect vNICs with wires on Open vSwitch."""
import warnings

# The `ovs` library imports eventlet whenever it is installed, and eventlet
# then prints its deprecation notice on every command: a notice for us
# (issue 38, the native hub), not for the operator who runs `vwctl`.
warnings.filterwarnings('ignore', message=r'(?s).*Eventlet is deprecated')
