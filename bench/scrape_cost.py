"""What one /metrics scrape costs a controller: seconds, bytes, its
memory after, and the longest its control loop went unanswered meanwhile
(GET /healthz, which the loop answers, from a thread every 0.1 s). A
scrape that holds the loop holds everything: switches' echo requests
too (OVS hangs up after 5 s of silence and twice its probe interval)."""
import threading
import time

import requests


def scrape_cost(api, rss):
    """`api`: common.Api; `rss()`: the controller's {'peak', 'now'} MiB."""
    gaps, stop = [], threading.Event()

    def watch():
        s = requests.Session()
        s.headers.update(api.s.headers)
        last = time.perf_counter()
        while not stop.is_set():
            try:
                s.get(api.url + '/healthz', timeout=120, verify=api.verify)
            except requests.RequestException:
                pass
            now = time.perf_counter()
            gaps.append(now - last)
            last = now
            time.sleep(0.1)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    time.sleep(1.0)
    before = rss()
    t0 = time.perf_counter()
    r = api.s.get(api.url + '/metrics', timeout=600, verify=api.verify)
    took = time.perf_counter() - t0
    time.sleep(1.0)
    stop.set()
    t.join(130)
    return {'seconds': round(took, 2), 'status': r.status_code,
            'bytes': len(r.content),
            'samples': sum(1 for line in r.text.splitlines()
                           if line and not line.startswith('#')),
            'healthz_longest_gap_s': round(max(gaps), 2) if gaps else None,
            'rss_mib_before': before, 'rss_mib_after': rss()}
