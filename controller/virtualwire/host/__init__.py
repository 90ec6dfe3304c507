"""What runs on a hypervisor, extender or gateway host: its bootstrap
(`vw-host-setup`), the offline CA tool (`vw-pki`) and enrolment."""
