"""The collector process (`virtualwire-collector`): flow counters read
off the controllers' loop."""
