"""Connect with Facebook (spec AR-29 to AR-32): how the workspace's Meta token is obtained, checked
and kept, apart from how it is used.

- :mod:`.verdict` — pure: what Meta's ``debug_token`` answer means for a token about to be saved
  (valid, not expired, this app's, both ads permissions), and when a person is asked to reconnect.
- :mod:`.states` — the login dialog's ``state``: made for one signed-in session, used once,
  expiring; only hashes stored.
- :mod:`.service` — the check of a pasted token, the code → token → long-lived token exchange,
  and the write of the token with what was learnt of it. Meta is called outside any write
  transaction; the callers commit.
"""
