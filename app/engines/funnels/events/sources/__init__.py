"""Webhook sources: the payment and booking providers that post events to the workspace, each
with its own endpoint URL and the provider's own signature scheme (Stripe's ``Stripe-Signature``
with the endpoint's ``whsec_`` secret, Cal.com's ``X-Cal-Signature-256``, or ours with a secret
of the source's own). The secret is stored encrypted like every workspace secret and shown once,
when it is generated; never read back."""
