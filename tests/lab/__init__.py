"""Tests of the sshd lab itself."""
