"""Fault injection: crashes, lost messages and broken connections while runs execute."""
