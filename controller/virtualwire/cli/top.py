"""`vwctl top`: the busiest wires, live (like virt-top): rates each way,
throughput, loss over the collector's last window. Refreshes every
--interval seconds until Ctrl-C; --once (or --json) prints one reading."""
import sys
import time

from tabulate import tabulate

HEADERS = ['wire', 'state', 'a', 'b', 'a->b pkt/s', 'b->a pkt/s', 'Mbit/s',
           'lost a->b', 'lost b->a', 'loss %']


def top_rows(doc, n):
    """The n busiest wires of a `GET /v1/stats` answer, busiest first."""
    rows = []
    for w in doc['wires']:
        win = {d: w[d].get('window') or {} for d in ('a_to_b', 'b_to_a')}
        pps = [win[d].get('packets_per_second', 0.0) for d in win]
        bps = sum(win[d].get('bits_per_second', 0.0) for d in win)
        entered = sum(win[d].get('entered_packets', 0) for d in win)
        # Beyond doubt: not what may still be in flight (metrics.collector).
        lost = [win[d].get('surely_lost_packets', 0) for d in win]
        rows.append((sum(pps), [
            w['connector_id'], w['state'], w['a'], w['b'],
            round(pps[0], 1), round(pps[1], 1), round(bps / 1e6, 3),
            lost[0], lost[1],
            round(100.0 * sum(lost) / entered, 2) if entered else 0.0]))
    rows.sort(key=lambda r: -r[0])
    return [r for _, r in rows[:n]]


def render(doc, n):
    span = next((w[d]['window']['seconds'] for w in doc['wires']
                 for d in ('a_to_b', 'b_to_a') if w[d].get('window')), None)
    head = ('VirtualWire top: %d wires, busiest %d; rates and loss over the '
            'last %s s (read every %ss)'
            % (len(doc['wires']), min(n, len(doc['wires'])),
               span if span is not None else '-', doc['read_every_s']))
    return head + '\n' + tabulate(top_rows(doc, n), headers=HEADERS)


def cmd_top(c, a):
    if a.once or a.json:
        doc = c.call('GET', '/v1/stats')
        return doc, render(doc, a.n)
    doc = {}
    try:
        while True:
            doc = c.call('GET', '/v1/stats')
            if sys.stdout.isatty():
                sys.stdout.write('\x1b[H\x1b[2J')
            print(render(doc, a.n), flush=True)
            time.sleep(a.interval)
    except KeyboardInterrupt:
        return doc, ''


def add_parser(sub):
    s = sub.add_parser('top', help='the busiest wires, live')
    s.add_argument('-n', type=int, default=20, help='rows (default 20)')
    s.add_argument('--interval', type=float, default=2.0,
                   help='seconds between refreshes (default 2)')
    s.add_argument('--once', action='store_true',
                   help='print one reading and exit')
    s.set_defaults(fn=cmd_top)
