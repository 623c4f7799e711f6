"""Example workflows. Run tickwork from the repository root so workers can import them."""
