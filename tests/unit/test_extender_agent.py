"""The extender agent's report cycle against a stand-in controller: it
hurries only while the controller says a key rotation is in flight, and
never keeps hurrying towards a controller it cannot reach."""
from virtualwire.extender.agent import Agent


class Controller:
    def __init__(self, replies):
        self.replies = list(replies)
        self.reports = 0

    def report(self, name, doc):
        self.reports += 1
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def reply(hurry):
    return {'links': [], 'ports': [], 'rotate_key': False, 'hurry': hurry}


def test_the_agent_hurries_while_told_and_not_towards_a_silent_controller(
        tmp_path):
    ctl = Controller([reply(False), reply(True), OSError('unreachable'),
                      reply(True), reply(False)])
    agent = Agent('xa', str(tmp_path), ctl, ('127.0.0.1', 9), switch=None)
    seen = []
    for _ in range(5):
        agent.talk()
        seen.append(agent.hurry)
    assert seen == [False, True, False, True, False]
    assert ctl.reports == 5
