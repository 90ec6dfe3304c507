"""A real Prometheus (Debian's package) scraping the lab's controller, as
an operator would run it: /metrics every second over HTTPS (the
controller CA verifies it) with a bearer token (a credentials file),
queried back over its HTTP API."""
import os
import subprocess
import time

import requests

from vwlab.shell import LabError, free_port, tail

CONFIG = """global:
  scrape_interval: {interval}s
  evaluation_interval: {interval}s
{rules}scrape_configs:
  - job_name: virtualwire
    metrics_path: /metrics
    scheme: {scheme}
{tls}    authorization:
      type: Bearer
      credentials_file: {token_file}
    static_configs:
      - targets: ['{target}']
"""


class Prometheus:
    def __init__(self, lab, workdir, interval=1, token_file=None,
                 rule_files=()):
        """token_file: what it scrapes with (default: the operator's; a
        reader credential is all it needs); rule_files: alerting rules
        it loads (ops/prometheus)."""
        self.lab, self.dir, self.interval = lab, str(workdir), interval
        self.rule_files = list(rule_files)
        self.token_file = token_file or lab.token_file
        self.port = free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        self.proc = None

    def __enter__(self):
        os.makedirs(self.dir, exist_ok=True)
        cfg = os.path.join(self.dir, 'prometheus.yml')
        with open(cfg, 'w') as f:
            # Over HTTPS it verifies the controller against the
            # controller CA (and the address in its certificate).
            tls = '    tls_config:\n      ca_file: %s\n' % \
                self.lab.pki.controller_ca if self.lab.pki else ''
            f.write(CONFIG.format(interval=self.interval,
                                  token_file=self.token_file,
                                  scheme=self.lab.scheme, tls=tls,
                                  target=self.lab.url.split('//', 1)[1],
                                  rules=''.join(
                                      ['rule_files:\n'] + [
                                          '  - %s\n' % r
                                          for r in self.rule_files])
                                  if self.rule_files else ''))
        self.log = os.path.join(self.dir, 'prometheus.log')
        self.proc = subprocess.Popen(
            ['prometheus', '--config.file=' + cfg,
             '--storage.tsdb.path=' + os.path.join(self.dir, 'data'),
             '--web.listen-address=127.0.0.1:%d' % self.port],
            stdout=subprocess.DEVNULL, stderr=open(self.log, 'w'))
        end = time.time() + 30
        while time.time() < end:
            if self.proc.poll() is not None:
                raise LabError('prometheus exited: %s' % tail(self.log, 10))
            try:
                if requests.get(self.url + '/-/ready', timeout=1).ok:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise LabError('prometheus not ready in 30 s: %s' % tail(self.log, 10))

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def query(self, promql):
        """[(labels, value)] of an instant query now."""
        r = requests.get(self.url + '/api/v1/query',
                         params={'query': promql}, timeout=10)
        doc = r.json()
        if doc.get('status') != 'success':
            raise LabError('query %s failed: %s' % (promql, doc))
        return [(s['metric'], float(s['value'][1]))
                for s in doc['data']['result']]

    def target_health(self):
        r = requests.get(self.url + '/api/v1/targets', timeout=10).json()
        return [(t['health'], t.get('lastError', ''))
                for t in r['data']['activeTargets']]

    def rules(self):
        """{rule name: (health, lastError)} of every loaded rule."""
        r = requests.get(self.url + '/api/v1/rules', timeout=10).json()
        return {rule['name']: (rule['health'], rule.get('lastError', ''))
                for g in r['data']['groups'] for rule in g['rules']}

    def alerts(self):
        """{alert name: state ('pending' or 'firing')} of active alerts."""
        r = requests.get(self.url + '/api/v1/alerts', timeout=10).json()
        return {a['labels']['alertname']: a['state']
                for a in r['data']['alerts']}
