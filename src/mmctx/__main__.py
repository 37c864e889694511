from mmctx.cli import app

app(prog_name="mmctx")
