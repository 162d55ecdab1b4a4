"""When a message step sends (FN-37): optionally at the contact's best hour, learnt from when they
opened and clicked before, falling back to the step's own time. Quiet hours stay in force on top
of it (FN-20): the best hour moves the send, the quiet hours may still hold it.

- ``best_hour`` the pure choice: the local hour with the most opens and clicks, and the next
               moment at that hour
- ``plan``     reads the contact's history and plans one send (what the step records)
"""
