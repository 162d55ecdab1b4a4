"""Run digests (spec AR-27): one message per run and channel, whatever the number of objects.

channels.py  the channels a rule's notify actions name, each with a stable key
digest.py    what a run did, summed up: counts per action and outcome, the top objects
formats.py   the digest as e-mail text, signed JSON, a Slack and a Teams message
send.py      once the run's last account finished: claim each channel once and send
"""
