"""Who made an echo stream's duplicate: the echo of one sequence number
reached the far end twice. Read from captures on the guest's taps:
  'handed twice'  the request was handed to the guest twice (the network
                  delivered it twice: ours);
  'echoed twice'  handed once, the guest sent its echo twice (the guest or
                  its QEMU: under TCG after a migration a virtio transmit
                  queue can send a descriptor again, as its ring can be
                  corrupted outright, docs/benchmarks.rst);
  'network'       handed once and echoed once on the taps, yet twice at
                  the far end (ours, on the way back);
  'not captured'  neither seen on the taps (the capture missed it: no
                  verdict, counted as the network's).
Pure: fed Datagrams (vwlab.capture)."""
from collections import Counter

OURS = ('handed twice', 'network', 'not captured')


def seq_of(payload: bytes):
    return int.from_bytes(payload[:8], 'big') if len(payload) >= 8 else None


def explain(seqs, grams, guest_ip, port, taps):
    """{seq: cause} for each duplicated sequence number; taps: the guest's
    {(host, tap)} over all its moves."""
    handed, echoed = Counter(), Counter()
    wanted = set(seqs)
    for d in grams:
        if (d.host, d.iface) not in taps:
            continue
        q = seq_of(d.payload)
        if q not in wanted:
            continue
        if d.outgoing and d.dst == guest_ip and d.dport == port:
            handed[q] += 1
        elif not d.outgoing and d.src == guest_ip and d.sport == port:
            echoed[q] += 1
    out = {}
    for q in seqs:
        if handed[q] > 1:
            out[q] = 'handed twice'
        elif echoed[q] > 1:
            out[q] = 'echoed twice'
        elif handed[q] or echoed[q]:
            out[q] = 'network'
        else:
            out[q] = 'not captured'
    return out
