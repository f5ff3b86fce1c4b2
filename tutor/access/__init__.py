"""Who is asking: accounts and passwords, sign-in sessions and cookies, whose data a tab
holds, failed sign-ins and sign-ups (shared in Redis), and usage limits.

May import storage; never turns, teach or web.
"""
