import os

from setuptools import find_packages, setup

setup(
    name='virtualwire',
    version='0.1.0',
    description='VirtualWire: connect/disconnect vNICs with wires on Open vSwitch',
    long_description=(open('README.rst').read()
                      if os.path.exists('README.rst') else ''),
    # The product is `virtualwire` (controller/); the root-only lab that
    # builds namespace hosts for the demo, tests and benchmarks is `vwlab`
    # (lab/), installed beside it but not part of it.
    package_dir={'': 'controller', 'vwlab': 'lab/vwlab'},
    packages=find_packages('controller') + ['vwlab'],
    package_data={'virtualwire': ['store/schema/*.ovsschema', 'core/*.json',
                                  'api/dashboard/*',
                                  'host/vw-host-setup', 'host/vw-pki'],
                  'vwlab': ['guest/*']},
    license='Apache-2.0',
    python_requires='>=3.11',
    install_requires=[
        'os-ken>=4.2,<5',
        'eventlet>=0.36',
        'WebOb>=1.8',
        'Routes>=2.5',
        'ovs>=3.1',
        'requests>=2.28',
        'tabulate>=0.9',
        'PyYAML>=6',
        'jsonschema>=4.18',
        'prometheus_client>=0.17',
    ],
    extras_require={
        # libvirt-python builds against libvirt-dev (scripts/install-deps).
        'libvirt': ['libvirt-python>=9'],
        'test': ['pytest>=7', 'scapy>=2.5', 'libvirt-python>=9',
                 'ruff>=0.6', 'mypy>=1.10', 'schemathesis>=4,<5',
                 'selenium>=4.20', 'openapi-spec-validator>=0.7'],
    },
    entry_points={'console_scripts': [
        'virtualwire-controller = virtualwire.main:main',
        'virtualwire-collector = virtualwire.collectord.main:main',
        'vwctl = virtualwire.cli.vwctl:main',
        'virtualwire-extender = virtualwire.extender.command:main',
        'virtualwire-intent-db = '
        'virtualwire.store.intent_db_service:main',
        'vw-host-setup = virtualwire.host.tools:host_setup',
        'vw-pki = virtualwire.host.tools:pki',
        'vw-host-agent = virtualwire.host.agent:main',
        'vw-frame-hold = virtualwire.host.hold_port:main',
        'vwlab = vwlab.cli:main',
    ]},
)
