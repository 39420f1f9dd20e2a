"""The fifth corpus, third blind batch (issue 27), continued: paths through a ``ModuleList``,
a parametrization, a plain list of modules, a ``ModuleDict`` and a list of dicts (mechanism
5), culprit ranking (6), split models and a submodule two models share (7), a discarded
``.to()`` (8), and other errors the panel must leave alone. See ``realworld_cases5.py``.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

CASES: list[Case] = [
    # -- 5. paths through containers ------------------------------------------------------
    Case(
        id="nystrom-layer-swapped-into-a-moved-modulelist",
        url="https://github.com/jeshraghian/snntorch/issues/316",
        classes=(5,),
        setup="""
        device = 'cuda'
        from nystrom_attention import NystromAttention

        def nystrom():
            return NystromAttention(dim=16, dim_head=8, heads=2, num_landmarks=4, pinv_iterations=2)

        class Encoder(nn.Module):
            def __init__(self, depth=3):
                super().__init__()
                self.layers = nn.ModuleList([nystrom() for _ in range(depth)])

            def forward(self, x):
                for attn in self.layers:
                    x = x + attn(x)
                return x

        enc = Encoder().to(device)
        enc.layers[1] = nystrom()        # re-initialised after the move
        x = torch.randn(2, 8, 16, device=device)
        """,
        cell="h = enc(x)\n",
        culprit="enc.layers[1]",
        checks=("h",),
        needs=("nystrom_attention",),
    ),
    Case(
        id="pruning-parametrization-keeps-a-plain-mask",
        url="https://github.com/pytorch/pytorch/pull/162717",
        classes=(5,),
        setup=OPENREG
        + """
        import torch.nn.utils.parametrize as parametrize

        class Pruned(nn.Module):
            def __init__(self, mask):
                super().__init__()
                self.mask = mask                 # a plain attribute

            def forward(self, w):
                return w * self.mask

        net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        parametrize.register_parametrization(net[2], 'weight', Pruned((torch.rand(3, 8) > 0.3).float()))
        net.to(device)
        x = torch.randn(4, 6).to(device)
        """,
        cell="logits = net(x)\n",
        culprit="net[2].parametrizations.weight[0].mask",
        target="openreg:0",
        checks=("logits",),
        fake=False,
        standin=True,
    ),
    Case(
        id="token-learner-keeps-its-convs-in-a-list",
        url="https://github.com/rish-16/tokenlearner-pytorch/issues/5",
        classes=(5,),
        setup=OPENREG
        + """

        class TokenLearner(nn.Module):
            def __init__(self, dim=8, n_tokens=4):
                super().__init__()
                self.attn_maps = [nn.Conv2d(dim, 1, 3, padding=1) for _ in range(n_tokens)]

            def forward(self, x):
                maps = torch.cat([m(x) for m in self.attn_maps], 1).flatten(2).softmax(-1)
                return torch.einsum('bnp,bcp->bnc', maps, x.flatten(2))

        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Conv2d(3, 8, 3, padding=1)
                self.tokens = TokenLearner()
                self.head = nn.Linear(8, 5)

            def forward(self, img):
                return self.head(self.tokens(self.stem(img)).mean(1))

        model = Classifier().to(device)
        img = torch.randn(2, 3, 6, 6).to(device)
        """,
        cell="logits = model(img)\n",
        culprit="model.tokens.attn_maps[0]",
        target="openreg:0",
        checks=("logits",),
        fake=False,
        standin=True,
    ),
    Case(
        id="new-task-head-added-to-a-moved-moduledict",
        url="https://github.com/ContinualAI/avalanche/pull/732",
        classes=(5,),
        setup=OPENREG
        + """
        from performer_pytorch import Performer

        class MultiTask(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = Performer(dim=16, depth=1, heads=2, dim_head=8)
                self.heads = nn.ModuleDict({'task0': nn.Linear(16, 3)})

            def forward(self, x, task):
                return self.heads[task](self.body(x).mean(1))

        model = MultiTask().to(device)
        model.heads['task1'] = nn.Linear(16, 4)     # a new task arrives after the move
        x = torch.randn(2, 5, 16).to(device)
        """,
        cell="""
        out0 = model(x, 'task0')
        out1 = model(x, 'task1')
        """,
        culprit="model.heads['task1']",
        target="openreg:0",
        checks=("out0", "out1"),
        fake=False,
        standin=True,
        needs=("performer_pytorch",),
    ),
    Case(
        id="product-quantizer-codebooks-in-a-list-of-dicts",
        xfail="issue 27 mechanism 6: the second codebook named first and moved alone; the first one, met first, is left: the re-run fails",
        url="https://github.com/pytorch/pytorch/issues/15005",
        classes=(5, 3),
        setup="""
        device = 'cuda'

        class ProductQuantizer(nn.Module):
            def __init__(self, d=8, m=2, k=4):
                super().__init__()
                self.proj = nn.Linear(d, d)
                self.codebooks = [{'centroids': torch.randn(k, d // m)} for _ in range(m)]

            def forward(self, x):
                parts = self.proj(x).chunk(len(self.codebooks), -1)
                return torch.stack([torch.cdist(p, cb['centroids']).argmin(-1)
                                    for p, cb in zip(parts, self.codebooks)], -1)

        pq = ProductQuantizer().to(device)
        feats = torch.randn(5, 8, device=device)
        """,
        cell="codes = pq(feats)\n",
        culprit="pq.codebooks[0]['centroids']",
        checks=("codes",),
    ),
    # -- 6. culprit ranking ---------------------------------------------------------------
    Case(
        id="condition-ids-met-before-the-images",
        url="https://github.com/yhw-yhw/TalkSHOW/issues/36",
        classes=(6,),
        setup=OPENREG
        + """
        class CondNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.cond_embed = nn.Embedding(4, 8)
                self.conv = nn.Conv2d(1, 8, 3, padding=1)
                self.out = nn.Conv2d(8, 2, 1)

            def forward(self, x, cond):
                gamma = self.cond_embed(cond)[:, :, None, None]
                return self.out(self.conv(x) * gamma)

        net = CondNet().to(device)
        loader = DataLoader(TensorDataset(torch.randn(4, 1, 6, 6), torch.randint(0, 4, (4,))),
                            batch_size=2)
        x, cond = next(iter(loader))
        """,
        cell="pred = net(x, cond)\n",
        culprit="cond",
        target="openreg:0",
        checks=("pred",),
        fake=False,
        standin=True,
    ),
    Case(
        id="gallery-embeddings-and-labels-loaded-on-cpu",
        url="https://github.com/Reza-Safdari/SimSiam-91.9-top1-acc-on-CIFAR10/issues/3",
        classes=(6,),
        setup=OPENREG
        + """
        from pytorch_metric_learning.distances import CosineSimilarity
        embedder = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 8)).to(device)
        gallery_labels = torch.randint(0, 5, (20,))     # both cached on disk, loaded on the CPU
        gallery_emb = torch.randn(20, 8)
        queries = torch.randn(4, 10).to(device)
        sim = CosineSimilarity()
        """,
        cell="""
        q = embedder(queries)
        top = sim(q, gallery_emb).topk(3, dim=1).indices
        pred = gallery_labels[top].mode(dim=1).values
        """,
        culprit="gallery_emb",
        target="openreg:0",
        checks=("top", "pred"),
        fake=False,
        standin=True,
        needs=("pytorch_metric_learning",),
    ),
    Case(
        id="relative-bias-met-before-the-padding-mask",
        url="https://github.com/pytorch/text/pull/1977",
        classes=(6,),
        setup=OPENREG
        + """
        from entmax import entmax15
        rel_bias = torch.randn(6, 6) * 0.1                 # precomputed once, on the CPU
        pad_mask = torch.zeros(2, 6, dtype=torch.bool)
        pad_mask[1, 4:] = True                             # from the collate function, on the CPU
        proj = nn.Linear(8, 16).to(device)
        x = torch.randn(2, 6, 8).to(device)
        """,
        cell="""
        q, k = proj(x).chunk(2, -1)
        attn = entmax15((q @ k.transpose(1, 2) + rel_bias).masked_fill(pad_mask[:, None, :], float('-inf')), dim=-1)
        """,
        culprit="rel_bias",
        target="openreg:0",
        checks=("attn",),
        fake=False,
        standin=True,
        needs=("entmax",),
    ),
    # -- 7. split models and shared submodules --------------------------------------------
    Case(
        id="shared-embedding-moved-back-by-the-cpu-decoder",
        url="https://github.com/pytorch/xla/issues/2719",
        classes=(7,),
        setup=OPENREG
        + """
        from performer_pytorch import Performer
        shared = nn.Embedding(30, 16)

        class Encoder(nn.Module):
            def __init__(self, embed):
                super().__init__()
                self.embed = embed
                self.body = Performer(dim=16, depth=1, heads=2, dim_head=8)

            def forward(self, ids):
                return self.body(self.embed(ids))

        class Decoder(nn.Module):
            def __init__(self, embed):
                super().__init__()
                self.embed = embed
                self.out = nn.Linear(16, 30)

            def forward(self, h, prev_ids):
                return self.out(h + self.embed(prev_ids))

        enc, dec = Encoder(shared), Decoder(shared)
        enc.to(device)
        dec.to('cpu')            # greedy decoding runs on the CPU
        ids = torch.randint(0, 30, (2, 5)).to(device)
        """,
        cell="h = enc(ids)\n",
        culprit="enc.embed",
        target="openreg:0",
        checks=("h",),
        fake=False,
        standin=True,
        needs=("performer_pytorch",),
    ),
    Case(
        id="text-encoder-kept-in-host-memory-on-purpose",
        url="https://github.com/Nerogar/mgds/pull/51",
        classes=(7,),
        setup=OPENREG
        + """
        vocab = 500
        text_encoder = nn.Sequential(nn.Embedding(vocab, 16), nn.Linear(16, 16))
        text_encoder.to('cpu')        # too big for the card: it runs on the CPU
        denoiser = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 4)).to(device)
        tokens = torch.randint(0, vocab, (2, 7)).to(device)   # the pipeline puts batches on the GPU
        """,
        cell="""
        emb = text_encoder(tokens)
        out = denoiser(emb.to(device))
        """,
        culprit="tokens",
        target="cpu",
        checks=("emb",),
        fake=False,
        standin=True,
    ),
    Case(
        id="monai-autoencoder-decoder-offloaded-to-cpu",
        url="https://github.com/aksub99/molecular-vae/pull/9",
        classes=(7,),
        setup=OPENREG
        + """
        from monai.networks.nets import AutoEncoder
        ae = AutoEncoder(spatial_dims=2, in_channels=1, out_channels=1, channels=(4, 8),
                         strides=(2, 2), num_res_units=0).to(device)
        ae.decode.to('cpu')           # offloaded: decoding runs on the CPU to save memory
        x = torch.randn(2, 1, 8, 8).to(device)
        """,
        cell="""
        z = ae.intermediate(ae.encode(x))
        recon = ae.decode(z)
        """,
        culprit="z",
        target="cpu",
        checks=("recon",),
        fake=False,
        standin=True,
        needs=("monai",),
    ),
    # -- 8. a discarded .to() -------------------------------------------------------------
    Case(
        id="metatensor-to-discarded-on-its-own-line",
        url="https://github.com/pytorch/pytorch/issues/25761",
        classes=(8,),
        setup=OPENREG
        + """
        from monai.data import MetaTensor
        from monai.networks.nets import UNet
        net = UNet(spatial_dims=2, in_channels=1, out_channels=2, channels=(4, 8),
                   strides=(2,), num_res_units=0).to(device)
        img = MetaTensor(torch.rand(1, 1, 8, 8), affine=torch.eye(4),
                         meta={'filename_or_obj': 'case_017.nii.gz'})
        """,
        cell="""
        img.to(device)
        seg = net(img).argmax(1)
        """,
        culprit="img",
        target="openreg:0",
        checks=("seg",),
        fix_has="img = img.to(device)",
        fake=False,
        standin=True,
        needs=("monai",),
    ),
    Case(
        id="to-discarded-inside-a-batch-helper",
        xfail="issue 27 mechanism 8: a dropped `.to()` inside a helper: named `raw[image]` (the helper's argument) where the case wants the caller's `batch[image]`; the dropped line is not mended",
        url="https://github.com/microsoft/mattersim/pull/147",
        classes=(8,),
        setup=OPENREG
        + """
        from monai.losses import DiceLoss
        from monai.networks.nets import UNet

        def to_device(batch, device):
            for key, value in batch.items():
                if torch.is_tensor(value):
                    value.to(device)
            return batch

        net = UNet(spatial_dims=2, in_channels=1, out_channels=2, channels=(4, 8),
                   strides=(2,), num_res_units=0).to(device)
        loss_fn = DiceLoss(to_onehot_y=True, softmax=True)
        raw = {'image': torch.randn(2, 1, 8, 8), 'label': torch.randint(0, 2, (2, 1, 8, 8)),
               'case_id': ['a', 'b']}
        """,
        cell="""
        batch = to_device(raw, device)
        loss = loss_fn(net(batch['image']), batch['label'])
        """,
        culprit="batch['image']",
        target="openreg:0",
        checks=("loss",),
        fix_has="batch[key] = value.to(device)",
        fake=False,
        standin=True,
        needs=("monai",),
    ),
    Case(
        id="to-discarded-on-each-parameter-in-a-comprehension",
        url="https://github.com/pytorch/pytorch/issues/14068",
        classes=(8,),
        setup="""
        device = 'cuda'
        from nystrom_attention import Nystromformer
        model = Nystromformer(dim=16, dim_head=8, heads=2, depth=1, num_landmarks=4)
        x = torch.randn(2, 8, 16, device=device)
        """,
        cell="""
        [p.to(device) for p in model.parameters()]
        y = model(x)
        """,
        culprit="model",
        checks=("y",),
        needs=("nystrom_attention",),
    ),
    # -- other errors: the panel stays quiet ----------------------------------------------------
    Case(
        id="quiet-dicece-target-with-the-wrong-channels",
        url="https://github.com/Project-MONAI/MONAI/pull/7587",
        classes=(0,),
        setup=OPENREG
        + """
        from monai.losses import DiceCELoss
        loss_fn = DiceCELoss(softmax=True)
        logits = torch.randn(1, 4, 3, 3).to(device)
        target = torch.randint(0, 2, (1, 2, 3, 3)).float().to(device)
        """,
        cell="loss = loss_fn(logits, target)\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("monai",),
    ),
    Case(
        id="quiet-entmax-row-fully-masked",
        url="https://github.com/deep-spin/entmax/issues/19",
        classes=(0,),
        setup=OPENREG
        + """
        from entmax import entmax15
        scores = torch.randn(3, 5).to(device)
        pad = torch.tensor([[False] * 5, [True] * 5, [False, False, True, True, True]]).to(device)
        """,
        cell="attn = entmax15(scores.masked_fill(pad, float('-inf')), dim=-1)\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("entmax",),
    ),
    Case(
        id="quiet-nystrom-mask-shaped-like-the-input",
        url="https://github.com/lucidrains/nystrom-attention/issues/9",
        classes=(0,),
        setup=OPENREG
        + """
        from nystrom_attention import NystromAttention
        attn = NystromAttention(dim=16, dim_head=8, heads=2, num_landmarks=4).to(device)
        x = torch.randn(2, 8, 16).to(device)
        mask = torch.ones(2, 8, 16, dtype=torch.bool).to(device)
        """,
        cell="out = attn(x, mask=mask)\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("nystrom_attention",),
    ),
    Case(
        id="quiet-botorch-targets-without-an-output-dimension",
        url="https://github.com/meta-pytorch/botorch/issues/1974",
        classes=(0,),
        setup=OPENREG
        + """
        from botorch.models import SingleTaskGP
        train_X = torch.rand(10, 2, dtype=torch.double).to(device)
        train_Y = train_X.sum(-1)
        """,
        cell="gp = SingleTaskGP(train_X, train_Y)\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("botorch",),
    ),
]
