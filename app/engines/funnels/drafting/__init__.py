"""Funnels drafted by a model from a description (FN-34 to FN-36).

The model's answer is only a proposal: it goes through the decoder, the validator and the
simulator a drawn graph goes through, and it is stored as a draft that a person publishes or not.

- ``schema``   the definition's JSON Schema (generated from the msgspec types) as a structured
               output request
- ``prompt``   the chat messages: instructions, the description, repair requests
- ``rounds``   the loop: ask, decode, validate, ask again with the validator's messages (pure
               deciders beside the one outside call)
- ``samples``  the simulation of sample contacts through the draft (rolled back)
- ``service``  the whole: quota, rounds, the draft and its record written in one transaction
- ``models``   the record kept on the draft: prompt, model, endpoint, tokens, rounds
"""
