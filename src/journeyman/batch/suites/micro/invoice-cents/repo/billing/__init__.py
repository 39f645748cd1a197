"""Invoices in whole cents."""

from .invoice import Invoice
from .money import format_cents, to_cents

__all__ = ["Invoice", "format_cents", "to_cents"]
