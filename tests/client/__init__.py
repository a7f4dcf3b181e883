"""The REST client (app.client.Client) against the in-process Engine, case by case."""
