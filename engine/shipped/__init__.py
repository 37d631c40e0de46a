"""The policies and prompt templates that ship with Lethe, as package data.

`policies/` and `prompts/` here are links to the repository's top-level folders of those
names, so a checkout and an editable install read the files in place and a built wheel
carries copies of them. Read them through `engine.base.resources`, never by path arithmetic.
"""
